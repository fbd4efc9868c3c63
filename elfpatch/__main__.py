from elfpatch.cli import main

raise SystemExit(main())
