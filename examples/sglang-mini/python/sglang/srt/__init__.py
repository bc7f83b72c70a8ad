"""The SGLang runtime ("srt"): workers, model runners and model classes."""
