// What a variant of the chunked controls (gdn_forward.cpp, gdn_backward.cpp) may set before it
// includes them, and the defaults of the controls themselves: the chunk length (64 tokens) and
// the manifest's role ("control"; "variant" for an implementation kept for measurements, which
// `kcv redteam` passes over). KCV_GDN_CONTROL_TEXT spells a number for the manifest.
#pragma once

#ifndef KCV_GDN_CONTROL_CHUNK
#define KCV_GDN_CONTROL_CHUNK 64
#endif
#ifndef KCV_GDN_CONTROL_ROLE
#define KCV_GDN_CONTROL_ROLE "control"
#endif
#define KCV_GDN_CONTROL_STR(x) #x
#define KCV_GDN_CONTROL_TEXT(x) KCV_GDN_CONTROL_STR(x)
