# Stands in for every deepspeed (and apex) module upstream imports but preprocessing never calls.
import importlib.abc
import importlib.machinery
import sys
import types
from unittest.mock import MagicMock


def _stand_in(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {}) if name[:1].isupper() else MagicMock()


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        return _stand_in(name)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.startswith("deepspeed.") or name.startswith("apex"):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _StubFinder())


def __getattr__(name):
    return _stand_in(name)
