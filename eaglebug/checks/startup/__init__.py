"""SGLang's start-up order read from the tree, and the step at which each finding would stop it."""
