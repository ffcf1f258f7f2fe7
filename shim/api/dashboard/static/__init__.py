"""The dashboard's script and stylesheet (package data: a package so that setuptools ships it)."""
