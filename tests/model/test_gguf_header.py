"""A GGUF file from outside (issue 73): a header claiming more than the file holds is refused in
one line before transformers' reader builds anything, and nothing is cached."""

import struct

import pytest

import rnr_lens as R


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (
            struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 21) + b"tokenizer.ggml.tokens" + struct.pack("<IIQ", 9, 8, 10**8),
            "has 100,000,000 entries",
        ),
        (struct.pack("<IQQ", 3, 0, 10**9), "1,000,000,000 metadata keys"),
        (
            struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 1) + b"w" + struct.pack("<I2Q", 2, 10**6, 10**6) + bytes(12),
            "claim 1,000,000,000,000 numbers",
        ),
        (struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IQ", 8, 50), "ends inside its header"),
    ],
    ids=["a-hundred-million-tokens", "a-billion-keys", "a-tensor-bigger-than-the-file", "truncated"],
)
def test_a_gguf_header_from_outside_is_bounded_before_transformers_reads_it(tmp_path, cache, header, said):
    """Issue 73: a GGUF whose token array claimed 10**8 entries made the reader build gigabytes."""
    bomb = tmp_path / "bomb.gguf"
    bomb.write_bytes(b"GGUF" + header)
    with pytest.raises(R.RnrLensError, match=said) as refused:
        R.load_model(bomb)
    assert "\n" not in str(refused.value)
    assert not any((cache / "models").glob("gguf-*")) if (cache / "models").exists() else True
