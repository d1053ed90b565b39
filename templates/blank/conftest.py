"""pytest configuration: this folder is the project root, so `pytest` imports the app's
package from here, and the `lineup_app` fixture (build + in-memory runtime) is available."""

pytest_plugins = ["lineup_runtime_lite.pytest_plugin"]
