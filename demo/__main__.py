"""`python -m demo`."""

from demo.story import main

raise SystemExit(main())
