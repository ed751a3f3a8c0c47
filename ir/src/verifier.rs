pub fn verify(_: &crate::Module) -> Vec<crate::Diagnostic> {
    vec![]
}
#[derive(Debug)]
pub struct VerifyError;
