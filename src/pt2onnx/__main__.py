from pt2onnx.cli import main

raise SystemExit(main())
