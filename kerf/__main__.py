"""`python -m kerf`: the `kerf` command."""

from kerf.cli import main

raise SystemExit(main())
