import sys

from rnr_lens.cli import main

sys.exit(main())
