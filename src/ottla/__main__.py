import sys

from ottla.cli.main import main

sys.exit(main())
