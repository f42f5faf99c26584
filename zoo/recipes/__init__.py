"""The training recipes (`zoo train`, `zoo finetune`, `zoo evaluate`) and their plots."""
