from eaglebug.cli import main

raise SystemExit(main())
