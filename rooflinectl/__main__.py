"""``python -m rooflinectl``: the same CLI, for machines where the entry point is not installed."""

from .cli import main

main()
