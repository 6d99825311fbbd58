"""Docverse, in miniature: a documentation host that takes uploaded builds and processes them in
the background with Conveyor, its tables and Conveyor's in one database (see README.md)."""
