"""The release contract: what may leave the system, and the record written beside it.

``roles`` (every source column declared: QI, dropped, pseudonymized, sensitive, kept),
``criteria`` (the spec's ``[release]`` acceptance criteria), ``figures`` (a release's risk
measured on what was written), ``sidecar`` (the JSON record beside every release) and
``gate`` (the one check every output path runs), and ``sections`` (the parser of the spec's
``[release]`` and ``[columns]`` sections, which ``spec_sections`` loads by name).  Nothing is
imported here, so parsing a spec loads ``sections``, ``roles`` and ``criteria`` and not the rest.
"""
