"""Loaded at the start of every Python process of a rank run by ``runtime.capture``.

Registers ``faulthandler`` on SIGUSR1 (see :mod:`runtime.stackdump`) unless ``EZPZ_STACKS=0``;
the hook that records an uncaught exception as it is raised (:mod:`runtime.raise_hook`, loaded
by its path: the rank's Python may not be able to import ``runtime``); the exit hook that
destroys a process group the script left alive (:mod:`runtime.exit_hook`, loaded the same way)
unless ``EZPZ_DESTROY_AT_EXIT=0``; and the thread that writes the Flight Recorder's entries into
the run directory (:mod:`runtime.flight`, loaded the same way) unless ``EZPZ_FLIGHT_RECORDER=0``;
removes this directory from ``sys.path`` again, and runs the ``sitecustomize`` this file
shadows, if there is one. Written for any Python 3 the rank might start, and silent: a rank must
never fail because of it.
"""


def _register():
    import os
    import sys

    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    run_dir = os.environ.pop("EZPZ_CAPTURE_IN_PROCESS", None)  # runtime.env.CAPTURE_IN_PROCESS_VAR
    done = _in_process(os.path.dirname(os.path.dirname(here)), run_dir) if run_dir else ()
    off = ("0", "no", "false", "off")
    try:
        import faulthandler
        import signal

        sig = signal.SIGUSR1
        wanted = os.environ.get("EZPZ_STACKS", "1").strip().lower() not in off
        if wanted and signal.getsignal(sig) in (signal.SIG_DFL, None):
            faulthandler.register(sig, file=2, all_threads=True, chain=False)
    except Exception:
        pass
    try:
        from importlib.machinery import PathFinder
        from importlib.util import module_from_spec, spec_from_file_location
    except ImportError:
        return
    # Each loaded by its path under its module's SHARED_NAME, which register() knows itself by
    # (it registers once per process); runtime.raise_hook first, so a raise is recorded even
    # when a later one fails to load.
    for name, file in (
        ("_ezpz_raise_hook", "raise_hook.py"),
        ("_ezpz_exit_hook", "exit_hook.py"),
        ("_ezpz_flight", "flight.py"),
    ):
        if name in done:
            continue
        try:
            spec = spec_from_file_location(name, os.path.join(os.path.dirname(here), file))
            module = module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            if not module.register():
                del sys.modules[name]
        except Exception:
            sys.modules.pop(name, None)
    spec = PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    shadowed = module_from_spec(spec)
    sys.modules["sitecustomize"] = shadowed
    spec.loader.exec_module(shadowed)


def _in_process(root, run_dir):
    """Watch this rank from its own interpreter (:mod:`runtime.in_process`): the process the
    launcher started stays in ``start`` as the watcher, the fork returns to run the program
    with the hooks registered; the shared names of those it registered (or tried) come back.
    The ``runtime`` package is imported from beside this file and forgotten again, so the
    program finds its own modules (a ``runtime`` of its own included) as it would have."""
    import os
    import sys

    before = set(sys.modules)
    sys.path.insert(0, root)
    done = []
    try:
        from runtime.in_process import start

        start(run_dir)
        # The hooks are imported already (runtime.capture's): those copies register, in the
        # same order, and none is loaded again by its path.
        for name in ("raise_hook", "exit_hook", "flight"):
            done.append(f"_ezpz_{name}")
            sys.modules[f"runtime.{name}"].register()
    except Exception as exc:  # the rank runs unwatched rather than not at all
        try:
            os.write(2, f"ezpz: rank not captured in process: {exc!r}\n".encode())
        except OSError:
            return
    finally:
        if sys.path[:1] == [root]:
            del sys.path[0]
        for name in [n for n in sys.modules if n not in before]:
            if name == "runtime" or name.startswith("runtime."):
                del sys.modules[name]
    return done


_register()
del _register
