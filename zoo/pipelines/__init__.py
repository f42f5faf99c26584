"""Corpus-scale translation and classification on Apache Beam (`pip install
"attention-zoo[pipeline]"`): an export of `zoo export` run by Beam's `RunInference` over a
text file (`zoo.pipelines.corpus.translate_file`) or a folder of images
(`zoo.pipelines.corpus.classify_folder`), on the DirectRunner or any runner Beam's options
name; `zoo translate --pipeline` and `zoo classify --pipeline` run them from the command line.

This package imports Beam only in its modules, so `import zoo.pipelines` works without it.
"""
