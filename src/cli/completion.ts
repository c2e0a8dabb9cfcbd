/**
 * `relay completion bash|zsh`: a completion script generated from the command tables, so a new command
 * or flag completes without touching this file. zsh runs the same functions through bashcompinit.
 */
import { UsageError } from './args.ts'

/** One command as completion sees it: its words (`profile set`) and its flags without dashes. */
export interface CompletionEntry {
  path: string
  flags: string[]
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

function bashFunctions(entries: CompletionEntry[]): string {
  // every prefix of a command path lists the words that may follow it
  const next = new Map<string, Set<string>>()
  for (const e of entries) {
    if (!e.path) continue
    const words = e.path.split(' ')
    for (let i = 0; i < words.length; i++) {
      const prefix = words.slice(0, i).join(' ')
      if (!next.has(prefix)) next.set(prefix, new Set())
      next.get(prefix)?.add(words[i])
    }
  }
  const wordCases = [...next].map(([prefix, words]) => `    ${quote(prefix)}) echo ${quote([...words].join(' '))} ;;`).join('\n')
  const flagCases = entries.map((e) => `    ${quote(e.path)}) echo ${quote(e.flags.map((f) => `--${f}`).join(' '))} ;;`).join('\n')
  return `_relay_words() {
  case "$1" in
${wordCases}
  esac
}
_relay_flags() {
  case "$1" in
${flagCases}
  esac
}
_relay() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case " $(_relay_words "$path") " in
      *" $w "*) path="\${path:+$path }$w" ;;
    esac
  done
  COMPREPLY=()
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_relay_flags "$path")" -- "$cur"))
  else
    local words
    words="$(_relay_words "$path")"
    [[ -n "$words" ]] && COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -o bashdefault -o default -F _relay relay
`
}

export function completionScript(shell: string | undefined, entries: CompletionEntry[]): string {
  if (shell === 'bash') {
    return `# bash completion for relay. Load it with: source <(relay completion bash)
# or install it: relay completion bash | sudo tee /etc/bash_completion.d/relay
${bashFunctions(entries)}`
  }
  if (shell === 'zsh') {
    return `#compdef relay
# zsh completion for relay. Load it with: source <(relay completion zsh)   (after compinit in ~/.zshrc)
autoload -U +X bashcompinit && bashcompinit
${bashFunctions(entries)}`
  }
  throw new UsageError(`completion needs a shell: bash or zsh${shell ? ` (not "${shell}")` : ''}`)
}
