/* utf8.h — UTF-8 text: checked strictly, or repaired where it must go out as JSON. */
#ifndef BW_UTF8_H
#define BW_UTF8_H

#include <stddef.h>

/* 1 if s[0..len) is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
int bw_utf8_valid(const unsigned char *s, size_t len);

/* Replaces, in place, every byte of the NUL-terminated s that does not start a valid
 * UTF-8 sequence with '?'. For text quoted into JSON that was cut to a length (which may
 * split a sequence) or never checked (a protobuf string, a server's error message):
 * jansson refuses to build a JSON string otherwise. */
void bw_utf8_sanitize(char *s);

#endif
