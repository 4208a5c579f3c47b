/* utf8.c — UTF-8 text: the strict check every text value and name of a request passes,
 * and the repair of text that must go out as UTF-8 (JSON replies, dead-letter records). */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

int bw_utf8_valid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        /* runs of ASCII eight bytes a step: every value and name is checked (8 % of the
         * proxy's protobuf path, 11 % of its JSON path, callgrind), most text is ASCII */
        uint64_t w;
        while (i + 8 <= len && (memcpy(&w, s + i, 8), (w & 0x8080808080808080u) == 0)) i += 8;
        if (i == len) break;
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; }
        else return 0;
        if (i + n > len) return 0;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n;
    }
    return 1;
}

void bw_utf8_sanitize(char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n && i + n <= len && bw_utf8_valid((const unsigned char *)s + i, n)) {
            i += n;
        } else {
            s[i++] = '?';
        }
    }
}
