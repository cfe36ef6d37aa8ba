"""`python -m claimcheck`: the `claimcheck` command."""

from claimcheck.tui.cli import main

raise SystemExit(main())
