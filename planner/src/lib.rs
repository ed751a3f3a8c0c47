//! The plan compiler every run is given: inner plans (`solve`) are checked
//! by the language's own front end (`ais_compiler::plan`). Its own crate so
//! that the VM's tests link the real planner without the command line.

use ais_compiler::plan::{self, PlanLimits, PlanTool};
use ais_vm::plan::{AcceptedPlan, DeniedFlow, PlanCompiler, PlanSpec, Rejected};

/// Checks plans with `ais-compiler`, within `limits`.
#[derive(Clone, Debug, Default)]
pub struct FrontEndPlanner {
    pub limits: PlanLimits,
}

impl FrontEndPlanner {
    fn spec(&self, spec: &PlanSpec) -> plan::PlanSpec {
        plan::PlanSpec {
            agent: spec.agent.clone(),
            tools: spec
                .tools
                .iter()
                .map(|t| PlanTool {
                    read_only: spec.read_only.contains(&t.name),
                    ..PlanTool::from_schema(&t.name, &t.description, &t.parameters)
                })
                .collect(),
            limits: self.limits,
        }
    }
}

impl PlanCompiler for FrontEndPlanner {
    fn guide(&self, spec: &PlanSpec) -> String {
        plan::guide(&self.spec(spec))
    }

    fn check_prefix(
        &self,
        spec: &PlanSpec,
        reply_so_far: &str,
    ) -> Option<ais_ir::bytecode::Program> {
        plan::check_prefix(&self.spec(spec), reply_so_far).map(|p| p.program)
    }

    fn check_flows(
        &self,
        plan: &AcceptedPlan,
        inputs: &[String],
        policy: &ais_ir::ifc::FlowPolicy,
    ) -> Vec<DeniedFlow> {
        plan::check_flows(&plan.source, &plan.program, inputs, policy)
            .into_iter()
            .map(|f| DeniedFlow {
                text: f.to_string(),
                sink: f.sink,
                argument: f.argument,
                sources: f.sources,
                path: f.path,
            })
            .collect()
    }

    fn check(&self, spec: &PlanSpec, reply: &str) -> Result<AcceptedPlan, Rejected> {
        let body = plan::extract_plan(reply);
        match plan::check_plan(&self.spec(spec), &body) {
            Ok(p) => Ok(AcceptedPlan {
                ir: ais_ir::print_module(&p.module),
                source: p.source,
                program: p.program,
                body,
            }),
            Err(problems) => Err(Rejected {
                body,
                problems: problems.iter().map(ToString::to_string).collect(),
            }),
        }
    }
}
