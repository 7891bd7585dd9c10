/* plugin_nosymbol.c - a shared object that is not a plugin: it exports
 * functions, but no `schednode_plugin` symbol.
 */
#include "schednode/schednode.h"

__attribute__((visibility("default"))) int schednode_plugin_missing(void);

int schednode_plugin_missing(void)
{
    return SN_API_VERSION;
}
