// Files embedded into the binary as text (`with { type: 'text' }`).
declare module '*.sql' {
  const text: string
  export default text
}
declare module '*/standalone.js' {
  const text: string
  export default text
}
declare module '*.css' {
  const text: string
  export default text
}
