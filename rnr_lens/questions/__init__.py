"""What is asked and how it is read: tasks and their loaders, few-shot examples, the default
deployment, and the answer readers.

Beneath measurement; a deployment config's hash is part of every audit id.

Modules: ``tasks``, ``shots``, ``deploy``, ``answers``. Each loads on first use, as an
attribute of this package too.
"""

MODULES = ("tasks", "shots", "deploy", "answers")
"""This folder's modules."""
