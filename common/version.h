/* version.h — what was built: the release (the VERSION file) and the commit (git's, or
 * "unknown" outside a checkout), written into build/gen/version.c by the Makefile. Every
 * program's --version and the daemons' bulkwrite_build_info metric say them. */
#ifndef BW_VERSION_H
#define BW_VERSION_H

extern const char bw_version[];
extern const char bw_commit[];

#endif
