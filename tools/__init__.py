"""Generators run by make (`make crds`, `make reference`): files of the repository made from
the models and the services; development tools, not part of the wheel or the image."""
