"""Reports of search results: files (CSV/JSON) now, plots and HTML as searches grow."""

from .boundaries import boundary_rows, write_boundaries

__all__ = ["boundary_rows", "write_boundaries"]
