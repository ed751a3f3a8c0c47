// External scanner for AIS: block comments nest (`/* a /* b */ c */`), which
// a regular expression cannot match.
#include "tree_sitter/parser.h"

#include <wctype.h>

// STRING_MARKER is valid only inside a string and never produced.
enum TokenType { BLOCK_COMMENT, STRING_MARKER };

void *tree_sitter_ais_external_scanner_create(void) { return NULL; }

void tree_sitter_ais_external_scanner_destroy(void *payload) { (void)payload; }

unsigned tree_sitter_ais_external_scanner_serialize(void *payload, char *buffer) {
  (void)payload;
  (void)buffer;
  return 0;
}

void tree_sitter_ais_external_scanner_deserialize(void *payload, const char *buffer,
                                                  unsigned length) {
  (void)payload;
  (void)buffer;
  (void)length;
}

bool tree_sitter_ais_external_scanner_scan(void *payload, TSLexer *lexer,
                                           const bool *valid_symbols) {
  (void)payload;
  if (!valid_symbols[BLOCK_COMMENT] || valid_symbols[STRING_MARKER]) return false;
  while (iswspace(lexer->lookahead)) lexer->advance(lexer, true);
  if (lexer->lookahead != '/') return false;
  lexer->advance(lexer, false);
  if (lexer->lookahead != '*') return false;
  lexer->advance(lexer, false);
  unsigned depth = 1;
  // An unterminated comment runs to the end of the file, as in the compiler.
  while (!lexer->eof(lexer)) {
    if (lexer->lookahead == '*') {
      lexer->advance(lexer, false);
      if (lexer->lookahead == '/') {
        lexer->advance(lexer, false);
        if (--depth == 0) break;
      }
    } else if (lexer->lookahead == '/') {
      lexer->advance(lexer, false);
      if (lexer->lookahead == '*') {
        lexer->advance(lexer, false);
        depth++;
      }
    } else {
      lexer->advance(lexer, false);
    }
  }
  lexer->result_symbol = BLOCK_COMMENT;
  return true;
}
