"""`python -m eaglebug ...` is exactly `eaglebug ...`: the same entry point as the console
script (the TUI modes, and everything else handed to the headless CLI). The entry point is the
one place that composes the layers; nothing else in `eaglebug/` imports `eaglebug/tui/`."""

from eaglebug.tui.entry import main

raise SystemExit(main())
