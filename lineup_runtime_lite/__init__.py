"""LineUp reference runtime: install verified bundles and route Agent calls."""

__all__: list[str] = []
