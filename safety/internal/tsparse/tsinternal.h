// Internal data layouts of the tree-sitter runtime, v0.25 (the version that
// github.com/tree-sitter/go-tree-sitter v0.25.0 compiles), copied from its
// src/length.h, src/subtree.h, src/tree.h and src/parser.h (MIT License,
// Copyright (c) 2018 Max Brunsfeld), for sa_flatten_fast. Only the leading
// fields that flatten.c reads are declared. TestFastFlatten and the check in
// NewLanguage compare sa_flatten_fast with the public-API sa_flatten; update
// this file together with the go-tree-sitter version.
#ifndef SAFETY_TSPARSE_TSINTERNAL_H
#define SAFETY_TSPARSE_TSINTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
#define SA_FAST_FLATTEN 1

typedef uint16_t sa_ts_symbol;

typedef struct {
  uint32_t bytes;
  uint32_t row, column;
} sa_ts_length;

// SubtreeInlineData, little-endian layout.
typedef struct {
  bool is_inline : 1;
  bool visible : 1;
  bool named : 1;
  bool extra : 1;
  bool has_changes : 1;
  bool is_missing : 1;
  bool is_keyword : 1;
  uint8_t symbol;
  uint16_t parse_state;
  uint8_t padding_columns;
  uint8_t padding_rows : 4;
  uint8_t lookahead_bytes : 4;
  uint8_t padding_bytes;
  uint8_t size_bytes;
} sa_ts_inline;

// SubtreeHeapData, up to the non-terminal fields.
typedef struct {
  volatile uint32_t ref_count;
  sa_ts_length padding;
  sa_ts_length size;
  uint32_t lookahead_bytes;
  uint32_t error_cost;
  uint32_t child_count;
  sa_ts_symbol symbol;
  uint16_t parse_state;
  bool visible : 1;
  bool named : 1;
  bool extra : 1;
  bool fragile_left : 1;
  bool fragile_right : 1;
  bool has_changes : 1;
  bool has_external_tokens : 1;
  bool has_external_scanner_state_change : 1;
  bool depends_on_column : 1;
  bool is_missing : 1;
  bool is_keyword : 1;
  union {
    struct {
      uint32_t visible_child_count;
      uint32_t named_child_count;
      uint32_t visible_descendant_count;
      int32_t dynamic_precedence;
      uint16_t repeat_depth;
      uint16_t production_id;
      struct {
        sa_ts_symbol symbol;
        uint16_t parse_state;
      } first_leaf;
    };
    struct {
      char data[24];
      uint32_t length;
    } external_scanner_state;
    int32_t lookahead_char;
  };
} sa_ts_heap;

// Subtree: the inline data, or a pointer to the heap data (whose children
// are stored just before it).
typedef union {
  sa_ts_inline data;
  const sa_ts_heap *ptr;
} sa_ts_subtree;

_Static_assert(sizeof(sa_ts_inline) == 8, "SubtreeInlineData layout");
_Static_assert(sizeof(sa_ts_subtree) == 8, "Subtree layout");

// struct TSTree, leading fields.
typedef struct {
  sa_ts_subtree root;
  const struct sa_ts_language *language;
} sa_ts_tree;

typedef struct {
  uint16_t field_id;
  uint8_t child_index;
  bool inherited;
} sa_ts_field_map_entry;

typedef struct {
  uint16_t index;
  uint16_t length;
} sa_ts_map_slice;

typedef struct {
  bool visible;
  bool named;
  bool supertype;
} sa_ts_symbol_metadata;

// struct TSLanguage, leading fields (the same in ABI 14 and 15).
typedef struct sa_ts_language {
  uint32_t abi_version;
  uint32_t symbol_count;
  uint32_t alias_count;
  uint32_t token_count;
  uint32_t external_token_count;
  uint32_t state_count;
  uint32_t large_state_count;
  uint32_t production_id_count;
  uint32_t field_count;
  uint16_t max_alias_sequence_length;
  const uint16_t *parse_table;
  const uint16_t *small_parse_table;
  const uint32_t *small_parse_table_map;
  const void *parse_actions;
  const char *const *symbol_names;
  const char *const *field_names;
  const sa_ts_map_slice *field_map_slices;
  const sa_ts_field_map_entry *field_map_entries;
  const sa_ts_symbol_metadata *symbol_metadata;
  const sa_ts_symbol *public_symbol_map;
  const uint16_t *alias_map;
  const sa_ts_symbol *alias_sequences;
} sa_ts_language;

#define SA_TS_SYM_ERROR ((sa_ts_symbol)-1)
#define SA_TS_SYM_ERROR_REPEAT ((sa_ts_symbol)-2)

#endif
#endif
