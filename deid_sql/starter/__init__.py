"""A starting spec for a data file (``deid-sql init``): the newcomer's first step.

``profile`` reads the data once through the engine (types, distinct counts, NULLs, ranges,
the most common values of each column); ``detect`` proposes each column's role from its name,
type and values (likely quasi-identifiers with their domains, identifiers, everything else
dropped for review); ``tomltext`` quotes names and values for TOML; ``write`` puts the spec
together, checks it as ``Spec`` would read it, and writes it atomically beside the data.
"""
