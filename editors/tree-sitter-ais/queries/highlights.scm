; Highlights for AIS. When several patterns capture one node the later one
; wins (Neovim and tree-sitter 0.27), so general patterns come first.

(identifier) @variable

(comment) @comment

; ---------------------------------------------------------------- literals
(string) @string
(escape_sequence) @string.escape
(interpolation) @embedded
(number) @number
[(true) (false)] @boolean
(null) @constant.builtin

; ---------------------------------------------------------------- definitions
(agent name: (identifier) @type)
(flow name: (identifier) @function)
(capability name: (identifier) @function)
(capability name: (string) @function)
(decorator "@" @attribute name: (identifier) @attribute)
(parameter name: (identifier) @variable.parameter)
(memory_decl name: (identifier) @property tier: (identifier) @type.builtin)
(belief name: (identifier) @property)
(goal name: (identifier) @property)
(goal_argument name: (identifier) @property)
(list_member key: (identifier) @property)
(text_member key: (identifier) @property)
(event_name (identifier) @label)
(type_identifier) @type

; ---------------------------------------------------------------- uses
(member_expression member: (identifier) @property)
(named_argument name: (identifier) @variable.parameter)
(call_expression function: (identifier) @function.call)
(call_expression function: (member_expression member: (identifier) @function.call))
(call_expression
  function: (identifier) @function.builtin
  (#any-of? @function.builtin
    "ask" "think" "reason" "llm" "plan" "solve" "reflect" "verify" "inv" "tool" "invoke"
    "exec" "exc" "qmem" "mem" "query_memory" "umem" "update_memory" "fence" "merge"
    "wait_all" "wait" "print" "communicate" "talk" "guard" "pause"))

; ---------------------------------------------------------------- keywords
[
  "agent" "flow" "capability" "memory" "beliefs" "goals" "on" "from"
] @keyword

[ "import" ] @keyword.import

[ "let" ] @keyword

[ "if" "else" "switch" "case" "default" ] @keyword.conditional

[ "loop" "in" ] @keyword.repeat

[ "try" "catch" ] @keyword.exception

[ "return" ] @keyword.return

[ "parallel" ] @keyword

; ---------------------------------------------------------------- operators
[
  "=" "==" "!=" "<" "<=" ">" ">=" "&&" "||" "+" "-" "*" "/" "%" "!" "|>" "->" "=>"
] @operator

[ "(" ")" "{" "}" "[" "]" ] @punctuation.bracket

[ "," ":" ";" "." ] @punctuation.delimiter
