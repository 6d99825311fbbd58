"""Conveyor's own behaviour (apps, nodes, the job API, integrations) on every engine, built on the
engine contract that ``tests/conformance/engine/`` proves."""
