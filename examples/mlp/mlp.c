/* placeholder replaced by the example model in the engine commit */
int zinc_mlp_placeholder(void);
int zinc_mlp_placeholder(void) { return 0; }
