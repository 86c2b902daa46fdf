"""``python -m dirigent.cli``: the same command as ``dirigent``."""

from dirigent.cli.main import main

main()
