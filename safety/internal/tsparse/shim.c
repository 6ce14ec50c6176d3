#include "shim.h"

#include <malloc.h>
#include <time.h>

// sa_current is the parse running on this thread, whose allocations the
// allocator below counts; NULL outside sa_parse. A parse runs on one thread
// from start to end (one cgo call), so a thread-local suffices, and frees
// on other threads (trees freed off the critical path) count for no parse.
static __thread sa_cancel *sa_current;

static void sa_count_mem(int64_t delta) {
  sa_cancel *c = sa_current;
  if (c != NULL) {
    c->mem += delta;
    if (c->mem > c->mem_peak) {
      c->mem_peak = c->mem;
    }
  }
}

static void *sa_malloc(size_t n) {
  void *p = malloc(n);
  if (p != NULL && sa_current != NULL) {
    sa_count_mem((int64_t)malloc_usable_size(p));
  }
  return p;
}

static void *sa_calloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p != NULL && sa_current != NULL) {
    sa_count_mem((int64_t)malloc_usable_size(p));
  }
  return p;
}

static void *sa_realloc(void *p, size_t n) {
  int64_t old = (p != NULL && sa_current != NULL) ? (int64_t)malloc_usable_size(p) : 0;
  void *q = realloc(p, n);
  if (q != NULL && sa_current != NULL) {
    sa_count_mem((int64_t)malloc_usable_size(q) - old);
  }
  return q;
}

static void sa_free(void *p) {
  if (p != NULL && sa_current != NULL) {
    sa_count_mem(-(int64_t)malloc_usable_size(p));
  }
  free(p);
}

typedef struct sa_input {
  const char *src;
  uint32_t len;
} sa_input;

static const char *sa_read(void *payload, uint32_t byte_index, TSPoint position, uint32_t *bytes_read) {
  (void)position;
  sa_input *in = (sa_input *)payload;
  if (byte_index >= in->len) {
    *bytes_read = 0;
    return "";
  }
  *bytes_read = in->len - byte_index;
  return in->src + byte_index;
}

static int64_t sa_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// sa_progress stops the parse once the cancel flag is set or the deadline
// has passed. tree-sitter calls it every 100 parse operations.
static bool sa_progress(TSParseState *state) {
  sa_cancel *c = (sa_cancel *)state->payload;
  c->calls++;
  if (c->stop_at > 0 && c->calls >= c->stop_at) {
    return true;
  }
  if (*(volatile size_t *)&c->flag != 0) {
    return true;
  }
  if (c->mem_limit > 0 && c->mem > c->mem_limit) {
    c->over_mem = 1;
    return true;
  }
  if (c->deadline_ns != 0 && sa_now_ns() > c->deadline_ns) {
    c->timed_out = 1;
    return true;
  }
  return false;
}

// sa_tree_delete frees t, whose parse held held bytes. After a large tree
// it gives the freed memory back to the system: glibc keeps freed small
// blocks in its arenas, so a process (the server) would otherwise stay at
// the peak of its largest check.
void sa_tree_delete(TSTree *t, int64_t held) {
  ts_tree_delete(t);
  sa_trim(held);
}

// sa_trim gives freed memory back to the system after a parse that held
// held bytes, when that was much.
void sa_trim(int64_t held) {
  if (held > (32 << 20)) {
    malloc_trim(0);
  }
}

// sa_use_libc_allocator makes tree-sitter allocate with libc, through
// wrappers that count what the parse on the calling thread holds.
void sa_use_libc_allocator(void) { ts_set_allocator(sa_malloc, sa_calloc, sa_realloc, sa_free); }

TSTree *sa_parse(TSParser *p, const char *src, uint32_t len, sa_cancel *cancel, int64_t budget_ns, int64_t mem_limit) {
  cancel->timed_out = 0;
  cancel->over_mem = 0;
  cancel->mem = 0;
  cancel->mem_peak = 0;
  cancel->mem_limit = mem_limit;
  cancel->calls = 0;
  cancel->deadline_ns = budget_ns > 0 ? sa_now_ns() + budget_ns : 0;
  sa_input in = {src, len};
  TSInput input = {&in, sa_read, 0, NULL};
  TSParseOptions opts = {cancel, sa_progress};
  sa_current = cancel;
  TSTree *t = ts_parser_parse_with_options(p, NULL, input, opts);
  if (t == NULL) {
    ts_parser_reset(p);
  }
  sa_current = NULL;
  return t;
}

uint32_t sa_count(TSTree *t) { return ts_node_descendant_count(ts_tree_root_node(t)); }

// sa_flatten writes up to cap nodes of t in pre-order into out and returns
// how many it wrote. It walks with a cursor, so deep trees use no C stack.
uint32_t sa_flatten(TSTree *t, sa_node *out, uint32_t cap) {
  if (cap == 0) {
    return 0;
  }
  TSTreeCursor c = ts_tree_cursor_new(ts_tree_root_node(t));
  uint32_t n = 0;
  int32_t parent = -1;
  int32_t prev = -1; // previous sibling of the node being visited
  for (;;) {
    TSNode node = ts_tree_cursor_current_node(&c);
    sa_node *o = &out[n];
    o->start = ts_node_start_byte(node);
    o->end = ts_node_end_byte(node);
    o->parent = parent;
    o->first_child = -1;
    o->next_sibling = -1;
    o->kind = ts_node_symbol(node);
    o->field = ts_tree_cursor_current_field_id(&c);
    o->flags = (ts_node_is_named(node) ? SA_NAMED : 0) | (ts_node_is_missing(node) ? SA_MISSING : 0) |
               (ts_node_is_extra(node) ? SA_EXTRA : 0);
    if (prev >= 0) {
      out[prev].next_sibling = (int32_t)n;
    } else if (parent >= 0) {
      out[parent].first_child = (int32_t)n;
    }
    int32_t self = (int32_t)n;
    n++;
    if (n == cap) {
      break;
    }
    if (ts_tree_cursor_goto_first_child(&c)) {
      parent = self;
      prev = -1;
      continue;
    }
    prev = self;
    while (!ts_tree_cursor_goto_next_sibling(&c)) {
      if (!ts_tree_cursor_goto_parent(&c)) {
        ts_tree_cursor_delete(&c);
        return n;
      }
      prev = parent;
      parent = out[parent].parent;
    }
  }
  ts_tree_cursor_delete(&c);
  return n;
}
