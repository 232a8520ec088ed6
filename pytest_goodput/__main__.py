import sys

from pytest_goodput.cli import main

sys.exit(main())
