"""The Engine API's contract: every engine proves it through the Engine methods alone."""
