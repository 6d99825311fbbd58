"""A worker module that ends the process when imported: the node must survive resolving it."""

import sys

sys.exit(3)
