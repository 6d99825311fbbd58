"""Integrations with frameworks that own more than a connection (Django)."""
