"""The dashboard's Jinja2 templates (package data: a package so that setuptools ships it)."""
