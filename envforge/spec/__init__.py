"""The env spec: ``references/<env>/env.toml`` as data both sides of a comparison share.

The contract is readable in ``load.py`` (:class:`EnvSpec`, its loading and checks); each table's
typed model is in ``tables.py``, the expression language of termination, events, ``valid`` and
scripted policies in ``expr.py``, the rules for every number a user can pass in ``bounds.py``,
and finding a spec by env name, ``--ref`` or beside a reference file in ``lookup.py``.

The spec is data: it imports no target, backend or verifier code
(``tests/house/test_architecture.py`` keeps it so). Finding a port is ``envforge/resolve.py``'s.
"""

from envforge.spec import bounds
from envforge.spec.load import (
    EnvSpec,
    installed_class_module,
    load_spec,
    reference_kind,
    with_reference,
)
from envforge.spec.lookup import (
    all_specs,
    project_roots,
    reference_file,
    references_dirs,
    spec_for_name,
    spec_for_reference,
)

__all__ = [
    "EnvSpec",
    "all_specs",
    "bounds",
    "installed_class_module",
    "load_spec",
    "project_roots",
    "reference_file",
    "reference_kind",
    "references_dirs",
    "spec_for_name",
    "spec_for_reference",
    "with_reference",
]
