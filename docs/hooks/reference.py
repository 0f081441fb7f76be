"""MkDocs hook: the reference pages, generated from the code when the site is built.

infra/reference/ returns each page (config keys, gpuc commands, exit codes, audit controls,
the stack file schema and its JSON Schema); here they join the site's files, so they exist in
the built site only and are never written twice. A file of the same path in docs/ is an error.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from gpu_cluster.infra.reference import pages

    for path, content in pages(config.site_url).items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(
                f"docs/{path} is generated from the code (infra/reference/); remove the file"
            )
        files.append(File.generated(config, path, content=content))
    return files
