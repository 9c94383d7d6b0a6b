# Registers the signoff plugin for acceptance/ and tests/.
pytest_plugins = ["signoff.plugin"]
