"""Loaded at the start of every Python process of a rank run by ``runtime.capture``.

Registers ``faulthandler`` on SIGUSR1 (see :mod:`runtime.stackdump`), removes this directory
from ``sys.path`` again, and runs the ``sitecustomize`` this file shadows, if there is one.
Written for any Python 3 the rank might start, and silent: a rank must never fail because of it.
"""


def _register():
    import os
    import sys

    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    try:
        import faulthandler
        import signal

        sig = signal.SIGUSR1
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            faulthandler.register(sig, file=2, all_threads=True, chain=False)
    except Exception:
        pass
    try:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec
    except ImportError:
        return
    spec = PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    shadowed = module_from_spec(spec)
    sys.modules["sitecustomize"] = shadowed
    spec.loader.exec_module(shadowed)


_register()
del _register
