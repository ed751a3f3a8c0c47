/**
 * Tree-sitter grammar for AIS (the language of compiler/src/syntax/,
 * described in docs/language.md).
 *
 * Line breaks end statements in the real parser; here they are whitespace,
 * because no AIS construct needs them to be parsed unambiguously for an
 * editor (two expressions are never juxtaposed). `;` is accepted anywhere
 * a line break could end a statement or member.
 *
 * Block comments nest, so they come from the external scanner (src/scanner.c).
 */

const PREC = {
  assign: 1,
  pipe: 2,
  or: 3,
  and: 4,
  equality: 5,
  compare: 6,
  sum: 7,
  product: 8,
  unary: 9,
  postfix: 10,
};

// Keywords that may also name things (agent members begin with them,
// statements never do): the real grammar's `Name`.
const SOFT_KEYWORDS = ['memory', 'beliefs', 'goals', 'capability', 'agent', 'flow', 'on'];

const IDENT = /[A-Za-z_][A-Za-z0-9_]*/;

/** Items separated by optional commas (a line break also separates them). */
function list(rule) {
  return repeat(seq(rule, optional(choice(',', ';'))));
}

/** Comma-separated items, trailing comma allowed. */
function commaSep(rule) {
  return optional(seq(rule, repeat(seq(',', rule)), optional(',')));
}

module.exports = grammar({
  name: 'ais',

  word: ($) => $.identifier,

  // `_string_marker` is never produced: it is valid only inside strings, which
  // tells the scanner not to take a `/*` there for a comment.
  externals: ($) => [$._block_comment, $._string_marker],

  extras: ($) => [/[ \t\r\n\f\uFEFF]/, $.comment],

  // `goal: "text" priority 2` against a next goal named `priority`: GLR.
  conflicts: ($) => [[$.goal]],

  rules: {
    // Imports anywhere at the top level: the real parser reports one after
    // an agent; an editor only needs to highlight it.
    source_file: ($) => repeat(choice($.import, $.agent, ';')),

    // `import "path.ais"` / `import "std/NAME"`.
    import: ($) => seq('import', field('path', $.string)),

    comment: ($) => choice(token(seq('//', /[^\n]*/)), $._block_comment),

    identifier: (_) => IDENT,

    _name: ($) => choice($.identifier, alias(choice(...SOFT_KEYWORDS), $.identifier)),

    // ------------------------------------------------------------ agents

    agent: ($) =>
      seq('agent', field('name', $.identifier), '{', repeat(choice($._member, ';')), '}'),

    _member: ($) =>
      choice(
        $.memory_block,
        $.beliefs_block,
        $.goals_block,
        $.capability,
        $.flow,
        $.handler,
        $.list_member,
        $.text_member,
      ),

    memory_block: ($) =>
      seq('memory', choice(seq('{', list($.memory_decl), '}'), $.memory_decl)),

    memory_decl: ($) => seq(field('name', $.identifier), ':', field('tier', $.identifier)),

    beliefs_block: ($) => seq('beliefs', '{', list($.belief), '}'),

    belief: ($) =>
      seq(field('name', $.identifier), choice(':', '='), optional('from'), field('value', $._expression)),

    goals_block: ($) => seq('goals', '{', list($.goal), '}'),

    goal: ($) =>
      seq(
        field('name', $.identifier),
        choice(
          seq('(', commaSep($.goal_argument), ')'),
          seq(
            ':',
            field('description', $.string),
            optional(
              choice(
                seq(field('keyword', $.identifier), field('priority', $.number)),
                seq('(', field('priority', $.number), ')'),
              ),
            ),
          ),
        ),
      ),

    goal_argument: ($) =>
      choice(seq(field('name', $.identifier), ':', field('value', $._primary)), $._primary),

    // `tools: [a, b]`, `discoverable: [find]`
    list_member: ($) =>
      seq(field('key', $.identifier), ':', '[', commaSep($.identifier), ']'),

    // `context: "..."`
    text_member: ($) => seq(field('key', $.identifier), ':', field('value', $.string)),

    decorator: ($) => seq('@', field('name', $.identifier)),

    capability: ($) =>
      prec.right(
        seq(
          repeat($.decorator),
          'capability',
          field('name', choice($.identifier, $.string)),
          field('parameters', $.parameters),
          optional(seq('->', field('return_type', $._type))),
          optional(';'),
        ),
      ),

    flow: ($) =>
      seq(
        repeat($.decorator),
        'flow',
        field('name', $._name),
        optional(field('parameters', $.parameters)),
        optional(seq('->', field('return_type', $._type))),
        field('body', $.block),
      ),

    parameters: ($) => seq('(', commaSep($.parameter), ')'),

    parameter: ($) => seq(field('name', $._name), optional(seq(':', field('type', $._type)))),

    _type: ($) => choice(alias($.identifier, $.type_identifier), $.generic_type),

    generic_type: ($) =>
      seq(field('name', alias($.identifier, $.type_identifier)), '<', $._type, '>'),

    handler: ($) =>
      prec.right(
        seq(
          'on',
          field('event', $.event_name),
          optional(seq('{', list($.parameter), '}')),
          optional(seq('if', field('guard', $._expression))),
          '=>',
          field('body', choice($.block, $._expression)),
        ),
      ),

    event_name: ($) => seq($._name, repeat(seq('.', $._name))),

    // ------------------------------------------------------------ statements

    block: ($) => seq('{', repeat(seq($._statement, optional(';'))), '}'),

    _statement: ($) =>
      choice(
        $.let_statement,
        $.bind_statement,
        $.return_statement,
        $.if_statement,
        $.parallel_statement,
        $.loop_statement,
        $.try_statement,
        $.expression_statement,
      ),

    let_statement: ($) =>
      seq(
        'let',
        field('name', $._name),
        optional(seq(':', field('type', $._type))),
        '=',
        field('value', $._expression),
      ),

    // `value -> name`
    bind_statement: ($) => seq(field('value', $._expression), '->', field('name', $._name)),

    return_statement: ($) => prec.right(seq('return', optional($._expression))),

    if_statement: ($) =>
      prec.right(
        seq(
          'if',
          field('condition', $._expression),
          field('consequence', $.block),
          optional(seq('else', field('alternative', choice($.block, $.if_statement)))),
        ),
      ),

    parallel_statement: ($) => seq('parallel', field('body', $.block)),

    loop_statement: ($) =>
      seq(
        'loop',
        '(',
        field('variable', $._name),
        'in',
        field('iterable', $._expression),
        ')',
        field('body', $.block),
      ),

    try_statement: ($) =>
      seq(
        'try',
        field('body', $.block),
        'catch',
        optional(seq('(', field('error', $._name), ')')),
        field('handler', $.block),
      ),

    expression_statement: ($) => $._expression,

    // ------------------------------------------------------------ expressions

    _expression: ($) =>
      choice($.assignment_expression, $.pipe_expression, $.binary_expression, $.unary_expression, $._postfix),

    assignment_expression: ($) =>
      prec.right(PREC.assign, seq(field('left', $._expression), '=', field('right', $._expression))),

    pipe_expression: ($) =>
      prec.left(PREC.pipe, seq(field('left', $._expression), '|>', field('right', $._expression))),

    binary_expression: ($) => {
      const table = [
        [PREC.or, '||'],
        [PREC.and, '&&'],
        [PREC.equality, choice('==', '!=')],
        [PREC.compare, choice('<', '<=', '>', '>=')],
        [PREC.sum, choice('+', '-')],
        [PREC.product, choice('*', '/', '%')],
      ];
      return choice(
        ...table.map(([p, op]) =>
          prec.left(p, seq(field('left', $._expression), field('operator', op), field('right', $._expression))),
        ),
      );
    },

    unary_expression: ($) =>
      prec(PREC.unary, seq(field('operator', choice('-', '!')), field('operand', $._expression))),

    _postfix: ($) =>
      choice($.call_expression, $.index_expression, $.member_expression, $._primary),

    call_expression: ($) =>
      prec(PREC.postfix, seq(field('function', $._postfix), field('arguments', $.arguments))),

    arguments: ($) => seq('(', commaSep(choice($.named_argument, $._expression)), ')'),

    named_argument: ($) => seq(field('name', $._name), ':', field('value', $._expression)),

    index_expression: ($) =>
      prec(PREC.postfix, seq(field('object', $._postfix), '[', field('index', $._expression), ']')),

    member_expression: ($) =>
      prec(PREC.postfix, seq(field('object', $._postfix), '.', field('member', $._name))),

    _primary: ($) =>
      choice(
        $.string,
        $.number,
        $.true,
        $.false,
        $.null,
        $._name,
        $.list,
        $.parenthesized_expression,
        $.switch_expression,
      ),

    list: ($) => seq('[', commaSep($._expression), ']'),

    parenthesized_expression: ($) => seq('(', $._expression, ')'),

    switch_expression: ($) =>
      seq('switch', field('value', $._expression), '{', list(choice($.case, $.default_case)), '}'),

    case: ($) =>
      seq('case', field('pattern', $._primary), '=>', field('body', choice($.block, $._expression))),

    default_case: ($) => seq('default', '=>', field('body', choice($.block, $._expression))),

    true: (_) => 'true',
    false: (_) => 'false',
    null: (_) => 'null',

    number: (_) => /[0-9][0-9_]*(\.[0-9][0-9_]*)?([eE][+-]?[0-9][0-9_]*)?/,

    // ------------------------------------------------------------ strings
    // Holes `{name}`, `{name.field}` and `{{name}}` interpolate; any other
    // brace is text. Every piece is an immediate token, so neither spaces
    // nor `//` inside a string are taken for extras.

    string: ($) =>
      choice(
        seq('"', repeat(choice($._string_marker, $._dq_content, $.escape_sequence, $.interpolation)), token.immediate('"')),
        seq("'", repeat(choice($._string_marker, $._sq_content, $.escape_sequence, $.interpolation)), token.immediate("'")),
      ),

    _dq_content: ($) => alias(token.immediate(prec(1, /[^"\\{}]+|[{}]/)), $.string_content),
    _sq_content: ($) => alias(token.immediate(prec(1, /[^'\\{}]+|[{}]/)), $.string_content),

    escape_sequence: (_) => token.immediate(seq('\\', choice(/u\{[0-9A-Fa-f]*\}/, /[^u]/, 'u'))),

    interpolation: (_) =>
      token.immediate(
        prec(
          2,
          choice(
            seq('{{', /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/, '}}'),
            seq('{', /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*/, '}'),
          ),
        ),
      ),
  },
});
