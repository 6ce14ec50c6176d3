// Minimal declarations of the tree-sitter C API (v0.25, ABI 15) used by this
// package. The library itself is compiled and linked by
// github.com/tree-sitter/go-tree-sitter; the layouts below must match its
// include/tree_sitter/api.h, which TestLayout guards.
#ifndef SAFETY_TSPARSE_SHIM_H
#define SAFETY_TSPARSE_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct TSParser TSParser;
typedef struct TSTree TSTree;
typedef struct TSLanguage TSLanguage;

typedef struct TSPoint {
  uint32_t row;
  uint32_t column;
} TSPoint;

typedef uint32_t (*DecodeFunction)(const uint8_t *string, uint32_t length, int32_t *code_point);

typedef struct TSInput {
  void *payload;
  const char *(*read)(void *payload, uint32_t byte_index, TSPoint position, uint32_t *bytes_read);
  int encoding; // TSInputEncodingUTF8 == 0
  DecodeFunction decode;
} TSInput;

typedef struct TSParseState {
  void *payload;
  uint32_t current_byte_offset;
  bool has_error;
} TSParseState;

typedef struct TSParseOptions {
  void *payload;
  bool (*progress_callback)(TSParseState *state);
} TSParseOptions;

typedef struct TSNode {
  uint32_t context[4];
  const void *id;
  const TSTree *tree;
} TSNode;

typedef struct TSTreeCursor {
  const void *tree;
  const void *id;
  uint32_t context[3];
} TSTreeCursor;

TSParser *ts_parser_new(void);
void ts_parser_delete(TSParser *self);
bool ts_parser_set_language(TSParser *self, const TSLanguage *language);
void ts_parser_reset(TSParser *self);
TSTree *ts_parser_parse_with_options(TSParser *self, const TSTree *old_tree, TSInput input, TSParseOptions options);
void ts_tree_delete(TSTree *self);
TSNode ts_tree_root_node(const TSTree *self);
uint32_t ts_node_descendant_count(TSNode self);
uint32_t ts_node_start_byte(TSNode self);
uint32_t ts_node_end_byte(TSNode self);
uint16_t ts_node_symbol(TSNode self);
bool ts_node_is_named(TSNode self);
bool ts_node_is_missing(TSNode self);
bool ts_node_is_extra(TSNode self);
TSTreeCursor ts_tree_cursor_new(TSNode node);
void ts_tree_cursor_delete(TSTreeCursor *self);
TSNode ts_tree_cursor_current_node(const TSTreeCursor *self);
uint16_t ts_tree_cursor_current_field_id(const TSTreeCursor *self);
bool ts_tree_cursor_goto_first_child(TSTreeCursor *self);
bool ts_tree_cursor_goto_next_sibling(TSTreeCursor *self);
bool ts_tree_cursor_goto_parent(TSTreeCursor *self);
void ts_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t),
                      void *(*new_realloc)(void *, size_t), void (*new_free)(void *));

// sa_node is one node of a flattened tree, in pre-order. Indexes are into the
// same array; -1 means none.
typedef struct sa_node {
  uint32_t start;
  uint32_t end;
  int32_t parent;
  int32_t first_child;
  int32_t next_sibling;
  uint16_t kind;
  uint16_t field;
  uint8_t flags;
} sa_node;

enum { SA_NAMED = 1, SA_MISSING = 2, SA_EXTRA = 4 };



// sa_cancel stops a parse: flag is set (by another thread) to cancel it,
// deadline_ns (CLOCK_MONOTONIC, 0 for none) is its time budget, and
// timed_out tells that the budget ran out. mem is the net heap memory the
// parse has allocated so far (its tree and its stacks), mem_limit (0 for
// none) its memory budget, mem_peak the most it held, and over_mem tells
// that the budget ran out. calls counts the progress callbacks of the last
// parse; stop_at, when positive, stops the parse at that callback (for
// tests that must stop a parse at an exact point).
typedef struct sa_cancel {
  size_t flag;
  int64_t deadline_ns;
  int32_t timed_out;
  int32_t over_mem;
  int64_t mem;
  int64_t mem_peak;
  int64_t mem_limit;
  int64_t calls;
  int64_t stop_at;
} sa_cancel;

void sa_use_libc_allocator(void);
void sa_tree_delete(TSTree *t, int64_t held);
void sa_trim(int64_t held);
TSTree *sa_parse(TSParser *p, const char *src, uint32_t len, sa_cancel *cancel, int64_t budget_ns, int64_t mem_limit);
uint32_t sa_count(TSTree *t);
uint32_t sa_flatten(TSTree *t, sa_node *out, uint32_t cap);
uint32_t sa_flatten_fast(TSTree *t, sa_node *out, uint32_t cap);
#endif
