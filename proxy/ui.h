/* ui.h — the SRE page (docs/operations.md): its files, built into bw-proxy
 * (scripts/embed-ui.sh makes build/gen/ui_assets.c from ui/), and the JSON endpoints
 * only the page needs; and the OpenAPI document, built in the same way. */
#ifndef BW_UI_H
#define BW_UI_H

#include <stddef.h>

typedef struct {
    const char *name; /* file name under ui/; NULL ends the table */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
} bw_ui_asset_t;

extern const bw_ui_asset_t bw_ui_assets[];
/* docs/openapi.yaml, served at GET /v1/openapi.yaml (build/gen/api_assets.c) */
extern const bw_ui_asset_t bw_api_assets[];

/* The asset named `name` ("" or "index.html": the page), or NULL. */
const bw_ui_asset_t *bw_ui_asset(const char *name);

#endif
